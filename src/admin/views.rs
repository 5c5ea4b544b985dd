//! What the debug UI reads: small answers, filtered and paged by the server, so the page stays
//! fast with 10,000 proxies and 5,000 objects. The UI polls `summary` (a few numbers) and fetches
//! only the page of the view it shows.

use super::state::{AdminState, xds};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use serde::Deserialize;
use std::collections::HashMap;

/// Rows a page holds unless asked for fewer (at most `MAX_LIMIT`).
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

#[derive(Debug, Deserialize, Default)]
pub struct Page {
    /// Words that must all appear (case-insensitive) in a row's text.
    #[serde(default)]
    q: String,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

impl Page {
    fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT)
    }

    fn words(&self) -> Vec<String> {
        self.q
            .split_whitespace()
            .map(|w| w.to_lowercase())
            .collect()
    }
}

fn matches(words: &[String], text: &str) -> bool {
    if words.is_empty() {
        return true;
    }
    let text = text.to_lowercase();
    words.iter().all(|w| text.contains(w.as_str()))
}

/// The rows of `items` matching `page`'s words (by `text`), paged: `{total, offset, items}`.
fn paged<T>(
    items: impl Iterator<Item = T>,
    page: &Page,
    text: impl Fn(&T) -> String,
    row: impl Fn(T) -> serde_json::Value,
) -> serde_json::Value {
    let words = page.words();
    let mut total = 0;
    let mut rows = Vec::new();
    for item in items {
        if !matches(&words, &text(&item)) {
            continue;
        }
        if total >= page.offset && rows.len() < page.limit() {
            rows.push(row(item));
        }
        total += 1;
    }
    serde_json::json!({ "total": total, "offset": page.offset, "items": rows })
}

/// `/debug/ui/summary`: the numbers the page polls, and the versions that tell it what changed;
/// a few hundred bytes whatever the last push touched (the push history is `/debug/push_status`).
pub async fn summary(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let snapshot = s.store.snapshot();
    let objects: usize = crate::config::Kind::config_kinds()
        .map(|k| snapshot.count(k))
        .sum();
    let Some(x) = xds(&s) else {
        return Json(serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "revision": snapshot.revision(),
            "objects": objects,
            "started": false,
        }));
    };
    let ctx = x.context();
    let connections = x.connections();
    let proxies = connections
        .iter()
        .filter(|c| !c.proxy.is_debug_client())
        .count();
    let nacked = connections
        .iter()
        .filter(|c| c.types.values().any(|t| t.last_nack.is_some()))
        .count();
    Json(serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "started": true,
        "pushVersion": ctx.version,
        "revision": snapshot.revision(),
        "proxies": proxies,
        "nacked": nacked,
        "services": ctx.registry.services.len(),
        "objects": objects,
        "pastVersions": x.past_versions(),
        "sync": sync_digest(&connections),
    }))
}

/// A digest of every stream's sync state (what was sent, acknowledged or rejected): the page
/// refetches a proxy list only when it moved. A string, since JSON numbers lose a u64.
fn sync_digest(connections: &[crate::xds::server::status::ConnectionStatus]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for c in connections {
        c.id.hash(&mut h);
        for (type_url, st) in c.types.iter() {
            type_url.hash(&mut h);
            st.nonce_sent.hash(&mut h);
            st.version_acked.hash(&mut h);
            st.last_nack.hash(&mut h);
        }
    }
    format!("{:x}", h.finish())
}

/// `/debug/ui/proxies`: connected proxies with their sync state per type and any NACK's reason,
/// NACKed ones first.
pub async fn proxies(
    State(s): State<AdminState>,
    Query(page): Query<Page>,
) -> Json<serde_json::Value> {
    let mut conns: Vec<_> = xds(&s)
        .map(|x| x.connections())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !c.proxy.is_debug_client())
        .collect();
    let nacked = |c: &crate::xds::server::status::ConnectionStatus| {
        c.types.values().any(|t| t.last_nack.is_some())
    };
    conns.sort_by(|a, b| {
        nacked(b)
            .cmp(&nacked(a))
            .then_with(|| a.proxy.id.cmp(&b.proxy.id))
    });
    Json(paged(
        conns.into_iter(),
        &page,
        |c| {
            format!(
                "{} {} {:?}",
                c.proxy.id, c.proxy.namespace, c.proxy.generator
            )
        },
        |c| {
            let types: serde_json::Map<String, serde_json::Value> = c
                .types
                .iter()
                .map(|(t, st)| {
                    (
                        t.short().to_string(),
                        serde_json::json!({ "state": st.state(), "error": st.last_nack, "resources": st.resources_sent }),
                    )
                })
                .collect();
            serde_json::json!({
                "node": c.proxy.id,
                "id": c.proxy.istio_id(),
                "namespace": c.proxy.namespace,
                "type": c.proxy.node_type(),
                "generator": c.proxy.generator,
                "delta": c.delta,
                "istioVersion": c.proxy.istio_version,
                "types": types,
            })
        },
    ))
}

/// `/debug/ui/objects`: Istio config objects (kind, namespace, name, resource version).
pub async fn objects(
    State(s): State<AdminState>,
    Query(page): Query<Page>,
) -> Json<serde_json::Value> {
    let snapshot = s.store.snapshot();
    let entries =
        crate::config::Kind::config_kinds().flat_map(|k| snapshot.list(k).map(move |e| (k, e)));
    Json(paged(
        entries,
        &page,
        |(k, e)| {
            format!(
                "{} {} {}",
                k.qualified_name(),
                e.config.metadata.namespace,
                e.config.metadata.name
            )
        },
        |(k, e)| {
            serde_json::json!({
                "kind": k.qualified_name(),
                "namespace": e.config.metadata.namespace,
                "name": e.config.metadata.name,
                "resourceVersion": e.version.to_string(),
            })
        },
    ))
}

/// `/debug/ui/object?kind=&namespace=&name=`: one object as stored.
pub async fn object(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(kind) = q
        .get("kind")
        .and_then(|k| crate::config::Kind::from_qualified_name(k))
    else {
        return (StatusCode::BAD_REQUEST, "kind is required\n").into_response();
    };
    let namespace = q.get("namespace").map(String::as_str).unwrap_or_default();
    let name = q.get("name").map(String::as_str).unwrap_or_default();
    let snapshot = s.store.snapshot();
    match snapshot.get_named(kind, namespace, name) {
        Some(e) => {
            let mut v = serde_json::to_value(&*e.config).unwrap_or_default();
            v["metadata"]["resourceVersion"] = e.version.to_string().into();
            Json(v).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            format!("no {} {namespace}/{name}\n", kind.name()),
        )
            .into_response(),
    }
}

/// `/debug/ui/services`: services in the registry with their endpoint counts.
pub async fn services(
    State(s): State<AdminState>,
    Query(page): Query<Page>,
) -> Json<serde_json::Value> {
    let Some(x) = xds(&s) else {
        return Json(paged(
            std::iter::empty::<()>(),
            &page,
            |_| String::new(),
            |_| serde_json::Value::Null,
        ));
    };
    let ctx = x.context();
    let registry = ctx.registry.clone();
    Json(paged(
        registry.services.values(),
        &page,
        |svc| format!("{} {} {}", svc.hostname, svc.namespace, svc.source),
        |svc| {
            let endpoints: usize = svc
                .ports
                .iter()
                .map(|p| registry.endpoints(&svc.hostname, p.number).len())
                .sum();
            serde_json::json!({
                "hostname": svc.hostname,
                "namespace": svc.namespace,
                "ports": svc.ports.iter().map(|p| format!("{}/{:?}", p.number, p.protocol)).collect::<Vec<_>>(),
                "resolution": svc.resolution,
                "endpoints": endpoints,
                "source": svc.source,
            })
        },
    ))
}

/// `/debug/ui/search?q=`: the first matches among proxies, objects and services.
pub async fn search(
    State(s): State<AdminState>,
    Query(mut page): Query<Page>,
) -> Json<serde_json::Value> {
    page.offset = 0;
    page.limit = Some(page.limit.unwrap_or(10).min(50));
    let proxies = proxies(
        State(s.clone()),
        Query(Page {
            q: page.q.clone(),
            offset: 0,
            limit: page.limit,
        }),
    )
    .await
    .0;
    let objects = objects(
        State(s.clone()),
        Query(Page {
            q: page.q.clone(),
            offset: 0,
            limit: page.limit,
        }),
    )
    .await
    .0;
    let services = services(State(s), Query(page)).await.0;
    Json(serde_json::json!({ "proxies": proxies, "objects": objects, "services": services }))
}
