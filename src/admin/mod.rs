//! The monitoring/debug HTTP server (istiod's 15014 and 8080): metrics, readiness, version, and the
//! debug views of the config store; and ControlZ (`controlz`, istiod's 9876).

pub mod controlz;
mod istiod_pages;
mod state;
mod views;

use crate::source::file::FileStatus;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub use state::{AdminState, DebugAccess, InjectTemplate};
use state::{InternalCaller, caller_namespace, xds};

pub fn router(state: AdminState) -> Router {
    let debug = Router::new()
        .route("/debug/configz", get(configz))
        .route("/debug/sources", get(sources))
        .route("/debug/adsz", get(istiod_pages::adsz))
        .route("/debug/list", get(istiod_pages::list))
        .route("/debug/connections", get(istiod_pages::connections))
        .route("/debug/instancesz", get(istiod_pages::instancesz))
        .route("/debug/telemetryz", get(istiod_pages::telemetryz))
        .route("/debug/endpointShardz", get(istiod_pages::endpoint_shardz))
        .route("/debug/edsz", get(istiod_pages::edsz))
        .route("/debug/ndsz", get(istiod_pages::ndsz))
        .route("/debug/ecdsz", get(istiod_pages::ecdsz))
        .route("/debug/clusterz", get(istiod_pages::clusterz))
        .route("/debug/networkz", get(istiod_pages::networkz))
        .route("/debug/authorizationz", get(istiod_pages::authorizationz))
        .route("/debug/cachez", get(istiod_pages::cachez))
        .route("/debug/krtz", get(istiod_pages::empty_list))
        .route("/debug/mcsz", get(istiod_pages::empty_list))
        .route("/debug/resourcesz", get(istiod_pages::resourcesz))
        .route("/debug/inject", get(istiod_pages::inject))
        .route("/debug/syncz", get(syncz))
        .route("/debug/registryz", get(registryz))
        .route("/debug/gateway_api", get(gateway_api))
        .route("/debug/envoy_filters", get(envoy_filters))
        .route("/debug/endpointz", get(endpointz))
        .route("/debug/config_dump", get(config_dump))
        .route("/debug/resourcez", get(resourcez))
        .route("/debug/ambientz", get(ambientz))
        .route("/debug/push_status", get(push_status))
        .route("/debug/mesh", get(mesh))
        .route("/debug/limitz", get(limitz))
        .route("/debug/log", get(log_get).put(log_set).post(log_set))
        .route("/debug/ui/summary", get(views::summary))
        .route("/debug/ui/proxies", get(views::proxies))
        .route("/debug/ui/objects", get(views::objects))
        .route("/debug/ui/object", get(views::object))
        .route("/debug/ui/services", get(views::services))
        .route("/debug/ui/search", get(views::search))
        .nest("/debug/controlz", controlz::json_router())
        .route("/debug", get(ui))
        .route("/debug/", get(ui))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            debug_guard,
        ));
    Router::new()
        .route("/metrics", get(metrics))
        .route("/ready", get(ready))
        .route("/version", get(version))
        .merge(debug)
        .with_state(state)
}

/// The debug pages served to `istio.io/debug` requests over xDS.
struct XdsDebugPages {
    router: Router,
}

impl crate::xds::server::debug::DebugPages for XdsDebugPages {
    fn page(
        &self,
        path_and_query: String,
        caller_namespace: Option<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<u8>> + Send>> {
        let router = self.router.clone();
        Box::pin(async move {
            use tower::ServiceExt;
            let uri = format!("/debug/{}", path_and_query.trim_start_matches('/'));
            let Ok(mut req) = axum::http::Request::get(uri).body(axum::body::Body::empty()) else {
                return format!("invalid debug path {path_and_query:?}\n").into_bytes();
            };
            req.extensions_mut().insert(InternalCaller {
                namespace: caller_namespace,
            });
            match router.oneshot(req).await {
                Ok(resp) => axum::body::to_bytes(resp.into_body(), DEBUG_PAGE_MAX)
                    .await
                    .map(|b| b.to_vec())
                    .unwrap_or_else(|e| format!("debug page unreadable: {e}\n").into_bytes()),
                Err(never) => match never {},
            }
        })
    }
}

/// The largest debug page sent over xDS (a config dump of a big proxy is a few MiB).
const DEBUG_PAGE_MAX: usize = 64 * 1024 * 1024;

/// The HTTP debug pages, for the xDS server's `istio.io/debug` type.
pub fn debug_pages(state: AdminState) -> Arc<dyn crate::xds::server::debug::DebugPages> {
    Arc::new(XdsDebugPages {
        router: router(state),
    })
}

/// Lets a debug request through from localhost, or with a valid token of the system namespace.
async fn debug_guard(
    State(s): State<AdminState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let local = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .is_some_and(|c| c.0.ip().is_loopback());
    if req.extensions().get::<InternalCaller>().is_some() {
        return next.run(req).await;
    }
    let Some(access) = s.debug_access.get() else {
        return if local {
            next.run(req).await
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response()
        };
    };
    if local || access.open {
        return next.run(req).await;
    }
    let authorization = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let credentials = crate::model::identity::Credentials {
        authorization,
        client_cert: None,
        // Debug access is for the control plane's own cluster.
        cluster_id: None,
    };
    let refused = |status: StatusCode, why: String| {
        tracing::warn!(why, "debug request refused");
        (status, format!("{why}\n")).into_response()
    };
    match access.auth.identify(credentials).await {
        Ok(Some(id)) if id.namespace == access.system_namespace => next.run(req).await,
        Ok(Some(id)) => refused(
            StatusCode::FORBIDDEN,
            format!(
                "{} may not use debug endpoints (service accounts of {} only)",
                id.uri(),
                access.system_namespace
            ),
        ),
        Ok(None) => refused(
            StatusCode::UNAUTHORIZED,
            "debug endpoints need a request from localhost or a bearer token".into(),
        ),
        Err(e) => refused(StatusCode::UNAUTHORIZED, e.to_string()),
    }
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

/// The build, as istiod's `/version` for `istioctl version` (`clientVersion`), and Rudder's name
/// and version.
async fn version() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "clientVersion": crate::xds::server::debug::build_info(),
        "name": env!("CARGO_PKG_NAME"),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// Every config object, as `kubectl get -o json` would show it, plus the store's resource version.
async fn configz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let snap = s.store.snapshot();
    let items: Vec<serde_json::Value> = crate::config::Kind::config_kinds()
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
/// Every proxy's sync state in istiod's shape (`?namespace=` for one namespace), with Rudder's
/// per-type view added (`XdsStatus::syncz`).
async fn syncz(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
    caller: Option<axum::Extension<InternalCaller>>,
) -> Json<Vec<serde_json::Value>> {
    let namespace = caller_namespace(&caller).or(q.get("namespace").map(String::as_str));
    Json(xds(&s).map(|x| x.syncz(namespace)).unwrap_or_default())
}

/// Services in the registry (what `istioctl` calls the service registry).
async fn registryz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let services: Vec<serde_json::Value> = xds(&s)
        .map(|x| {
            x.context()
                .registry
                .services
                .values()
                .map(|svc| serde_json::to_value(&**svc).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    Json(serde_json::Value::Array(services))
}

/// The Gateway API as the current push serves it: per Gateway its listeners' conditions and
/// attached routes, per route each parent it named and whether it attached (and why not), and
/// the Istio Gateways and VirtualServices derived from them, with the objects they come from.
/// Existence checks (backends, Secrets, a Gateway's Service) are the status's, not shown here.
async fn gateway_api(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let Some(x) = xds(&s) else {
        return Json(serde_json::json!({}));
    };
    let ctx = x.context();
    let t = &ctx.routing.gateway_api;
    let key = |k: &crate::config::ConfigKey| {
        format!("{}/{}/{}", k.kind.qualified_name(), k.namespace, k.name)
    };
    let derived = |d: &crate::model::origin::Derived| {
        let c = &d.config;
        serde_json::json!({
            "kind": c.kind, "namespace": c.metadata.namespace, "name": c.metadata.name,
            "from": Some(d.origin.parent_names()).filter(|p| !p.is_empty()),
            "spec": c.spec,
        })
    };
    Json(serde_json::json!({
        "classes": t.classes,
        "gateways": t.gateway_outcomes.iter().map(|(k, o)| (key(k), o)).collect::<std::collections::BTreeMap<_, _>>(),
        "routes": t.route_outcomes.iter().map(|(k, o)| (key(k), o)).collect::<std::collections::BTreeMap<_, _>>(),
        "derivedGateways": t.gateways.iter().map(&derived).collect::<Vec<_>>(),
        "derivedVirtualServices": t.virtual_services.iter().map(&derived).collect::<Vec<_>>(),
    }))
}

/// EnvoyFilters as the current push applies them (`XdsStatus::envoy_filters`).
async fn envoy_filters(State(s): State<AdminState>) -> Json<serde_json::Value> {
    Json(xds(&s).map(|x| x.envoy_filters()).unwrap_or_default())
}

/// Endpoints per service port.
async fn endpointz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let out: Vec<serde_json::Value> = xds(&s)
        .map(|x| {
            x.context()
                .registry
                .endpoints
                .iter()
                .map(|((host, port), eps)| serde_json::json!({ "service": host, "port": port, "endpoints": &**eps }))
                .collect()
        })
        .unwrap_or_default();
    Json(serde_json::Value::Array(out))
}

/// What a proxy is sent, as Envoy's admin `ConfigDump` in proto3 JSON, as istiod answers
/// `/debug/config_dump?proxyID=` (`include_eds` adds endpoints, `types=cds,lds` lists only those
/// resources); `names=proto` writes Envoy's own field names, to diff with the proxy's
/// `/config_dump`.
async fn config_dump(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
    caller: Option<axum::Extension<InternalCaller>>,
) -> Response {
    let Some(id) = q.get("proxyID").filter(|id| !id.is_empty()) else {
        return (
            StatusCode::BAD_REQUEST,
            "You must provide a proxyID in the query string\n",
        )
            .into_response();
    };
    let Some(x) = xds(&s) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "xDS not started\n").into_response();
    };
    let types: Option<Vec<crate::xds::types::TypeUrl>> = match q.get("types") {
        Some(list) => {
            let mut types = Vec::new();
            for short in list.split(',').filter(|t| !t.is_empty()) {
                match crate::xds::types::TypeUrl::from_short(short) {
                    Some(t) => types.push(t),
                    None => {
                        return (
                            StatusCode::BAD_REQUEST,
                            format!("unknown type {short:?} in types\n"),
                        )
                            .into_response();
                    }
                }
            }
            Some(types)
        }
        None => None,
    };
    let names = match q.get("names").map(String::as_str) {
        Some("proto") => crate::envoy::json::Names::Proto,
        _ => crate::envoy::json::Names::Json,
    };
    match x.config_dump(
        id,
        q.contains_key("include_eds"),
        types.as_deref(),
        names,
        caller_namespace(&caller),
    ) {
        Some(dump) => Json(dump).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("{}\n", crate::xds::server::debug::NOT_CONNECTED),
        )
            .into_response(),
    }
}

/// Rudder's per-resource view of a proxy: each resource as proto3 JSON with the config objects
/// that produced it.
async fn resourcez(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(id) = q.get("proxyID").or_else(|| q.get("proxy")) else {
        return (StatusCode::BAD_REQUEST, "proxyID is required\n").into_response();
    };
    let Some(x) = xds(&s) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "xDS not started\n").into_response();
    };
    let version = q.get("version").and_then(|v| v.parse().ok());
    match x.resources(id, version) {
        Some(dump) => Json(dump).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no connected proxy matches {id:?}\n"),
        )
            .into_response(),
    }
}

/// The whole ambient view (every workload, service and policy ztunnel could be sent), in
/// ztunnel's `/config_dump` shape.
async fn ambientz(State(s): State<AdminState>) -> Response {
    match xds(&s) {
        Some(x) => Json(x.ambient_dump()).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "xDS not started\n").into_response(),
    }
}

/// The recent pushes: when, why (which objects changed), full or EDS-only, how many proxies.
async fn push_status(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let x = xds(&s);
    Json(serde_json::json!({
        "version": x.as_ref().map(|x| x.context().version).unwrap_or(0),
        "pushes": x.map(|x| x.history()).unwrap_or_default(),
    }))
}

async fn mesh(State(s): State<AdminState>) -> Json<serde_json::Value> {
    Json(
        xds(&s)
            .map(|x| serde_json::to_value(&x.context().mesh).unwrap_or_default())
            .unwrap_or_default(),
    )
}

/// Every bound on what a client can cost, its setting, and how often it refused something.
async fn limitz(State(s): State<AdminState>) -> Json<Vec<serde_json::Value>> {
    let series: Vec<&str> = s.limits.iter().map(|l| l.refused_series).collect();
    let refused = s.metrics.samples(&series);
    Json(
        s.limits
            .iter()
            .zip(refused)
            .map(|(l, refused)| {
                serde_json::json!({
                    "name": l.name,
                    "setting": l.setting,
                    "value": l.value,
                    "refusedSeries": l.refused_series,
                    "refused": refused,
                })
            })
            .collect(),
    )
}

async fn log_get() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "level": crate::logging::current() }))
}

/// `PUT /debug/log?level=ads:debug,default:info` (Istio scopes) or a tracing filter.
async fn log_set(Query(q): Query<HashMap<String, String>>) -> Response {
    let Some(level) = q.get("level") else {
        return (StatusCode::BAD_REQUEST, "level is required\n").into_response();
    };
    match crate::logging::set(level) {
        Ok(filter) => {
            tracing::info!(filter, "log level changed");
            Json(serde_json::json!({ "level": filter })).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

/// The debug UI: one page, compiled into the binary, reading the JSON endpoints above.
async fn ui() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("ui/debug.html"),
    )
        .into_response()
}
