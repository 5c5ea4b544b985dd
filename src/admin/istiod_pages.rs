//! istiod's other debug pages, in its shapes, so the paths its index (and `istioctl dashboard
//! istiod-debug`) links to answer here too: the list of pages, connections, ADS clients, each
//! proxy's service targets, Telemetry, endpoint shards, typed config dumps, remote clusters,
//! network gateways, authorization policies, the xDS cache and the watched kinds.

use super::state::{AdminState, InternalCaller, caller_namespace, xds, xds_connections};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use std::collections::{BTreeMap, HashMap};

/// Every debug page with what it shows: istiod's index and `/debug/list`, and the UI's list.
pub const PAGES: &[(&str, &str)] = &[
    ("adsz", "Status and debug interface for ADS"),
    ("ambientz", "Debug support for ambient"),
    ("authorizationz", "Internal authorization policies"),
    ("cachez", "Info about the internal XDS caches"),
    (
        "clusterz",
        "List remote clusters where istiod reads endpoints",
    ),
    (
        "config_dump",
        "ConfigDump in the form of the Envoy admin config dump API for passed in proxyID",
    ),
    ("configz", "Debug support for config"),
    ("connections", "Info about the connected XDS clients"),
    ("ecdsz", "Status and debug interface for ECDS"),
    ("edsz", "Status and debug interface for EDS"),
    ("endpointShardz", "Info about the endpoint shards"),
    ("endpointz", "Endpoints per service port"),
    ("inject", "Active inject template"),
    ("instancesz", "Debug support for service instances"),
    (
        "krtz",
        "Debug support for krt (internal state); Rudder has no krt: an empty list",
    ),
    (
        "limitz",
        "Rudder: the bounds on clients and how often each refused",
    ),
    ("log", "Rudder: log levels (get, or set with level=)"),
    (
        "mcsz",
        "List information about Kubernetes MCS services; Rudder reads no MCS: an empty list",
    ),
    ("mesh", "Active mesh config"),
    ("ndsz", "Status and debug interface for NDS"),
    ("networkz", "List cross-network gateways"),
    ("push_status", "Last pushes, with what triggered them"),
    ("registryz", "Debug support for registry"),
    (
        "resourcez",
        "Rudder: a proxy's resources with the config objects that produced each",
    ),
    ("resourcesz", "Debug support for watched resources"),
    ("sources", "Rudder: the config files read and their errors"),
    (
        "syncz",
        "Synchronization status of all Envoys connected to this Pilot instance",
    ),
    ("telemetryz", "Debug Telemetry configuration"),
];

/// `/debug/list`: the pages, by name.
pub async fn list() -> Json<Vec<&'static str>> {
    Json(PAGES.iter().map(|(name, _)| *name).collect())
}

fn rfc3339(unix: u64) -> String {
    ::time::OffsetDateTime::from_unix_timestamp(unix as i64)
        .ok()
        .and_then(|t| {
            t.format(&::time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// `/debug/connections`: the connected xDS clients.
pub async fn connections(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let clients: Vec<serde_json::Value> = xds_connections(&s)
        .into_iter()
        .map(|c| {
            serde_json::json!({
                "connectionId": c.id,
                "connectedAt": rfc3339(c.connected_at_unix),
                "address": c.proxy.peer,
            })
        })
        .collect();
    Json(serde_json::json!({ "totalClients": clients.len(), "clients": clients }))
}

/// `/debug/adsz` (`?proxyID=` for one): istiod's fields for each ADS client (labels, metadata,
/// locality, watched names by type), with Rudder's parsed proxy added.
pub async fn adsz(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut conns = xds_connections(&s);
    if let Some(id) = q.get("proxyID") {
        conns.retain(|c| c.proxy.istio_id() == id || c.proxy.id.contains(id.as_str()));
        if conns.is_empty() {
            return not_connected();
        }
    }
    let clients: Vec<serde_json::Value> = conns
        .iter()
        .map(|c| {
            let watches: BTreeMap<&str, Vec<&String>> = c
                .types
                .iter()
                .map(|(t, w)| (t.url(), w.names.iter().collect()))
                .collect();
            serde_json::json!({
                "connectionId": c.id,
                "connectedAt": rfc3339(c.connected_at_unix),
                "address": c.proxy.peer,
                "labels": c.proxy.labels,
                "metadata": c.proxy.metadata,
                "locality": locality(&c.proxy.locality),
                "watches": watches,
                "proxy": c.proxy,
                "delta": c.delta,
            })
        })
        .collect();
    Json(serde_json::json!({ "totalClients": clients.len(), "clients": clients })).into_response()
}

/// Envoy's locality of `region/zone/subzone`.
fn locality(text: &str) -> serde_json::Value {
    let mut parts = text.splitn(3, '/');
    let mut out = serde_json::Map::new();
    for key in ["region", "zone", "sub_zone"] {
        if let Some(part) = parts.next().filter(|p| !p.is_empty()) {
            out.insert(key.into(), part.into());
        }
    }
    out.into()
}

fn not_connected() -> Response {
    (
        StatusCode::NOT_FOUND,
        format!("{}\n", crate::xds::server::debug::NOT_CONNECTED),
    )
        .into_response()
}

/// `/debug/instancesz`: per proxy, the service ports whose endpoints are at its address (what
/// istiod calls its service targets).
pub async fn instancesz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let Some(x) = xds(&s) else {
        return Json(serde_json::json!({}));
    };
    let registry = x.context().registry.clone();
    let mut out = serde_json::Map::new();
    for c in x.connections() {
        let targets: Vec<serde_json::Value> = registry
            .by_address
            .get(&c.proxy.ip)
            .map(|at| {
                at.iter()
                    .map(|(host, port, target)| {
                        serde_json::json!({
                            "Service": registry.services.get(host).map(|s| serde_json::to_value(&**s).unwrap_or_default()),
                            "Port": { "ServicePort": port, "TargetPort": target },
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.insert(c.proxy.istio_id().to_string(), targets.into());
    }
    Json(out.into())
}

/// `/debug/telemetryz`: the Telemetry resources in force.
pub async fn telemetryz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let snapshot = s.store.snapshot();
    let telemetries: Vec<serde_json::Value> = snapshot
        .list(crate::config::Kind::Telemetry)
        .map(|e| serde_json::to_value(&*e.config).unwrap_or_default())
        .collect();
    Json(serde_json::json!({ "telemetries": telemetries }))
}

/// `/debug/endpointShardz`: endpoints by service hostname and namespace, in the one shard
/// (cluster) Rudder reads.
pub async fn endpoint_shardz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let Some(x) = xds(&s) else {
        return Json(serde_json::json!({}));
    };
    let ctx = x.context();
    let cluster = ctx.mesh.cluster_id.clone();
    let mut out: BTreeMap<String, BTreeMap<String, serde_json::Value>> = BTreeMap::new();
    for (host, service) in ctx.registry.services.iter() {
        let endpoints: Vec<serde_json::Value> = ctx
            .registry
            .endpoints
            .range((host.clone(), 0)..=(host.clone(), u32::MAX))
            .flat_map(|((_, port), eps)| {
                eps.iter().map(move |e| {
                    serde_json::json!({
                        "servicePort": port,
                        "address": e.address,
                        "endpointPort": e.port,
                        "labels": e.labels,
                        "healthy": e.healthy,
                    })
                })
            })
            .collect();
        out.entry(host.clone()).or_default().insert(
            service.namespace.clone(),
            serde_json::json!({ "Shards": { cluster.clone(): endpoints } }),
        );
    }
    Json(serde_json::to_value(out).unwrap_or_default())
}

type Caller = Option<axum::Extension<InternalCaller>>;

/// `/debug/edsz`, `/debug/ndsz`, `/debug/ecdsz`: one type of a proxy's config dump, as istiod's
/// typed config dump pages. Types Rudder does not serve (NDS, ECDS) have nothing to list.
fn typed_config_dump(
    short: &str,
    s: &AdminState,
    q: &HashMap<String, String>,
    caller: &Caller,
) -> Response {
    let Some(id) = q.get("proxyID").filter(|id| !id.is_empty()) else {
        return (
            StatusCode::BAD_REQUEST,
            "You must provide a proxyID in the query string\n",
        )
            .into_response();
    };
    let Some(x) = xds(s) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "xDS not started\n").into_response();
    };
    let types: Vec<crate::xds::types::TypeUrl> = crate::xds::types::TypeUrl::from_short(short)
        .into_iter()
        .collect();
    match x.config_dump(
        id,
        false,
        Some(&types),
        crate::envoy::json::Names::Json,
        caller_namespace(caller),
    ) {
        Some(dump) => Json(dump).into_response(),
        None => not_connected(),
    }
}

pub async fn edsz(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
    caller: Caller,
) -> Response {
    typed_config_dump("eds", &s, &q, &caller)
}

pub async fn ndsz(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
    caller: Caller,
) -> Response {
    typed_config_dump("nds", &s, &q, &caller)
}

pub async fn ecdsz(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
    caller: Caller,
) -> Response {
    typed_config_dump("ecds", &s, &q, &caller)
}

/// `/debug/clusterz`: the clusters endpoints are read from, the config cluster first, in
/// istiod's shape.
pub async fn clusterz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let cluster = xds(&s)
        .map(|x| x.context().mesh.cluster_id.clone())
        .unwrap_or_else(|| "Kubernetes".into());
    let synced = s.ready.load(std::sync::atomic::Ordering::Acquire);
    let mut out = vec![serde_json::json!({
        "id": cluster,
        "secretName": "",
        "syncStatus": if synced { "synced" } else { "syncing" },
    })];
    out.extend(
        s.remote_clusters
            .list()
            .into_iter()
            .filter_map(|c| serde_json::to_value(c).ok()),
    );
    Json(serde_json::Value::Array(out))
}

/// `/debug/networkz`: the network gateways, in istiod's shape (an empty list before the first
/// push context, or with no networks).
pub async fn networkz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    Json(
        xds(&s)
            .map(|x| x.network_gateways())
            .unwrap_or_else(|| serde_json::json!([])),
    )
}

/// `/debug/authorizationz`: every AuthorizationPolicy by namespace, oldest first, in istiod's
/// shape (`authorization_policies`: `namespace_to_policies`, `root_namespace`).
pub async fn authorizationz(State(s): State<AdminState>) -> Json<serde_json::Value> {
    use crate::config::Kind;
    let snapshot = s.store.snapshot();
    let mut policies: Vec<&crate::config::Config> = snapshot
        .list(Kind::AuthorizationPolicy)
        .map(|e| e.config.as_ref())
        .collect();
    policies.sort_by(|a, b| a.age_key().cmp(&b.age_key()));
    let mut by_namespace: BTreeMap<&str, Vec<serde_json::Value>> = BTreeMap::new();
    for p in policies {
        let spec = serde_json::to_value(&p.spec).unwrap_or_default();
        by_namespace
            .entry(p.metadata.namespace.as_str())
            .or_default()
            .push(serde_json::json!({
                "name": p.metadata.name,
                "namespace": p.metadata.namespace,
                "annotations": p.metadata.annotations,
                "spec": spec,
            }));
    }
    let root = xds(&s)
        .map(|x| x.context().mesh.root_namespace.clone())
        .unwrap_or_else(|| "istio-system".into());
    Json(serde_json::json!({
        "authorization_policies": {"namespace_to_policies": by_namespace, "root_namespace": root}
    }))
}

/// `/debug/cachez`: the current push's xDS cache, as istiod's: the resource names by type URL;
/// `sizes` the bytes by type URL and in total; `clear` empties it.
pub async fn cachez(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(x) = xds(&s) else {
        return Json(serde_json::json!({})).into_response();
    };
    if q.get("clear").is_some_and(|v| !v.is_empty()) {
        x.clear_cache();
        return "Cache cleared\n".into_response();
    }
    Json(x.cachez(q.get("sizes").is_some_and(|v| !v.is_empty()))).into_response()
}

/// `/debug/krtz` and `/debug/mcsz`: istiod's krt collections and Kubernetes MCS services; Rudder
/// has neither, so the honest answer is istiod's empty one (a list), not a 404 that
/// `istioctl bug-report` would record as a broken control plane.
pub async fn empty_list() -> Json<serde_json::Value> {
    Json(serde_json::json!([]))
}

/// `/debug/resourcesz`: the config kinds read, as istiod lists its schemas (group, version,
/// kind).
pub async fn resourcesz() -> Json<serde_json::Value> {
    let kinds: Vec<serde_json::Value> = crate::config::Kind::config_kinds()
        .map(|k| {
            serde_json::json!({
                "group": k.group(),
                "version": k.served_versions().first().copied().unwrap_or("v1"),
                "kind": k.name(),
            })
        })
        .collect();
    Json(serde_json::Value::Array(kinds))
}

/// `/debug/inject`: the sidecar injection settings in force (404 without an injector).
pub async fn inject(State(s): State<AdminState>) -> Response {
    match s.inject_template.get() {
        Some(template) => Json(template()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
