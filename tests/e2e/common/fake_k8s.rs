//! An in-process fake Kubernetes API server that speaks the real list/watch HTTP protocol, so kube-rs is
//! exercised for real: resourceVersions, watch replay from a resourceVersion, bookmarks, `410 Gone`
//! (as an ERROR watch event, like the real server) after compaction, create/replace/delete with 409s,
//! and Istio resources that exist only while their CRD does. Test hooks inject 429s, block lists, pause
//! watches and compact history.
#![allow(dead_code)]

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

#[derive(Clone, Debug)]
struct Event {
    rv: u64,
    coll: String,
    ns: String,
    kind: &'static str,
    obj: Value,
}

#[derive(Default)]
struct Inner {
    rv: u64,
    compacted: u64,
    /// collection ("group/plural") → (namespace, name) → object
    objects: BTreeMap<String, BTreeMap<(String, String), Value>>,
    log: Vec<Event>,
    /// path prefix → (status, remaining)
    failures: Vec<(String, u16, usize)>,
    blocked: Vec<String>,
    /// token → TokenReview status
    tokens: HashMap<String, Value>,
    /// Users SubjectAccessReview refuses (everything else is allowed).
    refused_users: Vec<String>,
    /// Status subresource writes served.
    status_writes: u64,
    /// When set (the in-cluster mode), the bearer tokens the API accepts; anything else is 401.
    api_tokens: Option<Vec<String>>,
    /// Requests served per bearer token.
    token_uses: HashMap<String, u64>,
}

impl Inner {
    /// A copy of the object `name` in `ns` of collection `coll`.
    fn object(&self, coll: &str, ns: &str, name: &str) -> Option<Value> {
        self.objects
            .get(coll)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }
}

struct Shared {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Event>,
    /// Bumped to close every open watch; watch requests wait while it is odd (paused).
    watch_epoch: watch::Sender<u64>,
    unblocked: tokio::sync::Notify,
}

/// Built-in resource types: (group, version, plural, kind, namespaced).
const BUILTIN: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "services", "Service", true),
    ("", "v1", "serviceaccounts", "ServiceAccount", true),
    ("apps", "v1", "deployments", "Deployment", true),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
    ),
    ("networking.k8s.io", "v1", "ingresses", "Ingress", true),
    (
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        false,
    ),
    ("", "v1", "pods", "Pod", true),
    ("", "v1", "namespaces", "Namespace", false),
    ("", "v1", "nodes", "Node", false),
    ("", "v1", "configmaps", "ConfigMap", true),
    ("", "v1", "secrets", "Secret", true),
    (
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    ),
    ("coordination.k8s.io", "v1", "leases", "Lease", true),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "TokenReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
    (
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        false,
    ),
];

/// The token of the tests' own client in the in-cluster mode.
pub const ADMIN_TOKEN: &str = "test-admin-token";

pub struct FakeApi {
    pub addr: SocketAddr,
    pub kubeconfig: PathBuf,
    shared: Arc<Shared>,
    _dir: tempfile::TempDir,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Target {
    coll: String,
    group: String,
    version: String,
    kind: String,
    namespaced: bool,
    ns: Option<String>,
    name: Option<String>,
    /// `status` for the status subresource.
    subresource: Option<String>,
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code});
    let mut r = (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response();
    if code == 429 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, "1".parse().unwrap());
    }
    r
}

fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .map(|q| {
            q.split('&')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (k.to_string(), urlencoding_decode(v))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn urlencoding_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(v) = u8::from_str_radix(
                std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"),
                16,
            )
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

/// RFC 7386: objects merge key by key, `null` deletes, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (k, v) in fields {
        if v.is_null() {
            target.as_object_mut().map(|o| o.remove(k));
        } else {
            merge_patch(&mut target[k], v);
        }
    }
}

fn matches_selectors(obj: &Value, q: &HashMap<String, String>) -> bool {
    let meta = &obj["metadata"];
    if let Some(fs) = q.get("fieldSelector").filter(|s| !s.is_empty()) {
        for term in fs.split(',') {
            let Some((k, v)) = term.split_once('=') else {
                continue;
            };
            let actual = match k {
                "metadata.name" => meta["name"].as_str().unwrap_or_default(),
                "metadata.namespace" => meta["namespace"].as_str().unwrap_or_default(),
                _ => continue,
            };
            if actual != v {
                return false;
            }
        }
    }
    if let Some(ls) = q.get("labelSelector").filter(|s| !s.is_empty()) {
        for term in ls.split(',') {
            let ok = match term.split_once('=') {
                Some((k, v)) => meta["labels"][k].as_str() == Some(v),
                // `key` (exists) and `!key` (does not).
                None => match term.strip_prefix('!') {
                    Some(k) => meta["labels"][k].is_null(),
                    None => !meta["labels"][term].is_null(),
                },
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

impl Shared {
    fn resolve(&self, path: &str) -> Option<Target> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match *segs.first()? {
            "api" => (
                "".to_string(),
                segs.get(1)?.to_string(),
                &segs[2.min(segs.len())..],
            ),
            "apis" => (
                segs.get(1)?.to_string(),
                segs.get(2)?.to_string(),
                &segs[3.min(segs.len())..],
            ),
            _ => return None,
        };
        let (ns, plural, name, subresource) =
            if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
                (
                    Some(rest[1].to_string()),
                    rest[2].to_string(),
                    rest.get(3).map(|s| s.to_string()),
                    rest.get(4).map(|s| s.to_string()),
                )
            } else {
                (
                    None,
                    rest.first()?.to_string(),
                    rest.get(1).map(|s| s.to_string()),
                    rest.get(2).map(|s| s.to_string()),
                )
            };
        let (kind, namespaced) = if let Some(b) = BUILTIN
            .iter()
            .find(|b| b.0 == group && b.1 == version && b.2 == plural)
        {
            (b.3.to_string(), b.4)
        } else {
            // A custom resource: served only while its CRD exists and serves this version.
            let inner = self.inner.lock().unwrap();
            let crd = inner
                .objects
                .get("apiextensions.k8s.io/customresourcedefinitions")?
                .get(&(String::new(), format!("{plural}.{group}")))?;
            let served = crd["spec"]["versions"]
                .as_array()?
                .iter()
                .any(|v| v["name"] == version.as_str() && v["served"] == true);
            if !served {
                return None;
            }
            (
                crd["spec"]["names"]["kind"].as_str()?.to_string(),
                crd["spec"]["scope"] == "Namespaced",
            )
        };
        Some(Target {
            coll: format!("{group}/{plural}"),
            group,
            version,
            kind,
            namespaced,
            ns,
            name,
            subresource,
        })
    }

    fn api_version(t: &Target) -> String {
        if t.group.is_empty() {
            t.version.clone()
        } else {
            format!("{}/{}", t.group, t.version)
        }
    }

    fn present(t: &Target, mut obj: Value) -> Value {
        obj["apiVersion"] = Shared::api_version(t).into();
        obj["kind"] = t.kind.clone().into();
        obj
    }

    /// Stores `obj` (as the API server presents it) and records the watch event for it.
    fn store(
        inner: &mut Inner,
        events: &broadcast::Sender<Event>,
        t: &Target,
        ns: &str,
        name: String,
        obj: Value,
        kind: &'static str,
    ) -> Value {
        let obj = Shared::present(t, obj);
        inner
            .objects
            .entry(t.coll.clone())
            .or_default()
            .insert((ns.to_string(), name), obj.clone());
        Shared::record(inner, events, &t.coll, ns, kind, obj.clone());
        obj
    }

    fn record(
        inner: &mut Inner,
        events: &broadcast::Sender<Event>,
        coll: &str,
        ns: &str,
        kind: &'static str,
        obj: Value,
    ) {
        let ev = Event {
            rv: inner.rv,
            coll: coll.to_string(),
            ns: ns.to_string(),
            kind,
            obj,
        };
        inner.log.push(ev.clone());
        let _ = events.send(ev);
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    {
        let mut inner = shared.inner.lock().unwrap();
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_string();
        if let Some(accepted) = &inner.api_tokens {
            if !accepted.contains(&bearer) {
                return status(401, "Unauthorized", "Unauthorized");
            }
            *inner.token_uses.entry(bearer).or_default() += 1;
        }
        if let Some(f) = inner
            .failures
            .iter_mut()
            .find(|f| path.starts_with(&f.0) && f.2 > 0)
        {
            f.2 -= 1;
            let code = f.1;
            return status(code, "TooManyRequests", "injected failure");
        }
    }
    let q = query(&uri);
    let is_watch = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    if method == Method::GET && !is_watch {
        loop {
            let notified = shared.unblocked.notified();
            if !shared
                .inner
                .lock()
                .unwrap()
                .blocked
                .iter()
                .any(|b| path.starts_with(b))
            {
                break;
            }
            notified.await;
        }
    }
    let Some(t) = shared.resolve(&path) else {
        return status(
            404,
            "NotFound",
            &format!("the server could not find the requested resource ({path})"),
        );
    };
    match (method, t.name.clone()) {
        (Method::POST, None) if t.coll == "authentication.k8s.io/tokenreviews" => {
            let Ok(mut review) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "invalid JSON");
            };
            let token = review["spec"]["token"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let inner = shared.inner.lock().unwrap();
            review["status"] = inner.tokens.get(&token).cloned().unwrap_or_else(
                || json!({"authenticated": false, "error": "invalid bearer token"}),
            );
            (StatusCode::CREATED, axum::Json(review)).into_response()
        }
        (Method::POST, None) if t.coll == "authorization.k8s.io/subjectaccessreviews" => {
            let Ok(mut review) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "invalid JSON");
            };
            let user = review["spec"]["user"].as_str().unwrap_or_default();
            let refused = shared
                .inner
                .lock()
                .unwrap()
                .refused_users
                .iter()
                .any(|u| u == user);
            review["status"] = if refused {
                json!({"allowed": false, "reason": "no RBAC rule allows it"})
            } else {
                json!({"allowed": true, "reason": "allowed by the fake"})
            };
            (StatusCode::CREATED, axum::Json(review)).into_response()
        }
        (Method::GET, None) if is_watch => watch_response(shared, t, q).await,
        (Method::GET, None) => {
            let inner = shared.inner.lock().unwrap();
            let items: Vec<Value> = inner
                .objects
                .get(&t.coll)
                .into_iter()
                .flatten()
                .filter(|((ns, _), _)| t.ns.as_ref().is_none_or(|want| want == ns))
                .map(|(_, o)| Shared::present(&t, o.clone()))
                .filter(|o| matches_selectors(o, &q))
                .collect();
            axum::Json(json!({
                "apiVersion": Shared::api_version(&t),
                "kind": format!("{}List", t.kind),
                "metadata": {"resourceVersion": inner.rv.to_string()},
                "items": items,
            }))
            .into_response()
        }
        (Method::GET, Some(name)) => {
            let inner = shared.inner.lock().unwrap();
            match inner
                .objects
                .get(&t.coll)
                .and_then(|m| m.get(&(t.ns.clone().unwrap_or_default(), name.clone())))
            {
                Some(o) => axum::Json(Shared::present(&t, o.clone())).into_response(),
                None => status(404, "NotFound", &format!("{} \"{name}\" not found", t.kind)),
            }
        }
        (Method::POST, None) => {
            let Ok(mut obj) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "invalid JSON");
            };
            let mut name = obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if name.is_empty()
                && let Some(prefix) = obj["metadata"]["generateName"].as_str()
            {
                // As the API server: the prefix and a suffix of its own.
                let n = shared.inner.lock().unwrap().rv + 1;
                name = format!("{prefix}{n:05x}");
                obj["metadata"]["name"] = name.clone().into();
            }
            if name.is_empty() {
                return status(422, "Invalid", "metadata.name is required");
            }
            let ns = t.ns.clone().unwrap_or_default();
            let mut inner = shared.inner.lock().unwrap();
            let terminating = inner
                .objects
                .get("/namespaces")
                .and_then(|m| m.get(&(String::new(), ns.clone())))
                .is_some_and(|n| !n["metadata"]["deletionTimestamp"].is_null());
            if t.namespaced && terminating {
                return status(
                    403,
                    "Forbidden",
                    &format!(
                        "unable to create new content in namespace {ns} because it is being terminated"
                    ),
                );
            }
            if inner
                .objects
                .get(&t.coll)
                .is_some_and(|m| m.contains_key(&(ns.clone(), name.clone())))
            {
                return status(
                    409,
                    "AlreadyExists",
                    &format!("{} \"{name}\" already exists", t.kind),
                );
            }
            inner.rv += 1;
            let rv = inner.rv;
            if t.namespaced {
                obj["metadata"]["namespace"] = ns.clone().into();
            }
            obj["metadata"]["resourceVersion"] = rv.to_string().into();
            obj["metadata"]["uid"] = format!("uid-{rv}").into();
            obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z".into();
            obj["metadata"]["generation"] = 1.into();
            let obj = Shared::store(&mut inner, &shared.events, &t, &ns, name, obj, "ADDED");
            (StatusCode::CREATED, axum::Json(obj)).into_response()
        }
        (Method::PATCH, Some(name))
            if matches!(t.subresource.as_deref(), Some("status" | "approval")) =>
        {
            // A JSON merge patch of the status subresource: only `status` changes, the generation
            // does not, the resourceVersion does.
            let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "invalid JSON");
            };
            let ns = t.ns.clone().unwrap_or_default();
            let mut inner = shared.inner.lock().unwrap();
            let Some(mut obj) = inner.object(&t.coll, &ns, &name) else {
                return status(404, "NotFound", &format!("{} \"{name}\" not found", t.kind));
            };
            merge_patch(&mut obj["status"], &patch["status"]);
            inner.rv += 1;
            obj["metadata"]["resourceVersion"] = inner.rv.to_string().into();
            inner.status_writes += 1;
            let obj = Shared::store(&mut inner, &shared.events, &t, &ns, name, obj, "MODIFIED");
            axum::Json(obj).into_response()
        }
        (Method::PATCH, Some(name)) if t.subresource.is_none() => {
            // Server-side apply and merge patches, as far as the controllers use them: the object
            // is created when absent, else the patch is merged into it (no field ownership).
            let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "invalid JSON");
            };
            let ns = t.ns.clone().unwrap_or_default();
            let mut inner = shared.inner.lock().unwrap();
            inner.rv += 1;
            let rv = inner.rv;
            let (obj, event) = match inner.object(&t.coll, &ns, &name) {
                Some(mut obj) => {
                    let before = obj["spec"].clone();
                    merge_patch(&mut obj, &patch);
                    if obj["spec"] != before {
                        let g = obj["metadata"]["generation"].as_i64().unwrap_or(1);
                        obj["metadata"]["generation"] = (g + 1).into();
                    }
                    (obj, "MODIFIED")
                }
                None => {
                    let mut obj = patch.clone();
                    obj["metadata"]["uid"] = format!("uid-{rv}").into();
                    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z".into();
                    obj["metadata"]["generation"] = 1.into();
                    (obj, "ADDED")
                }
            };
            let mut obj = obj;
            if t.namespaced {
                obj["metadata"]["namespace"] = ns.clone().into();
            }
            obj["metadata"]["resourceVersion"] = rv.to_string().into();
            let obj = Shared::store(&mut inner, &shared.events, &t, &ns, name, obj, event);
            axum::Json(obj).into_response()
        }
        (Method::PUT, Some(name)) => {
            let Ok(mut obj) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "invalid JSON");
            };
            let ns = t.ns.clone().unwrap_or_default();
            let mut inner = shared.inner.lock().unwrap();
            let Some(current) = inner.object(&t.coll, &ns, &name) else {
                return status(404, "NotFound", &format!("{} \"{name}\" not found", t.kind));
            };
            if let Some(rv) = obj["metadata"]["resourceVersion"]
                .as_str()
                .filter(|s| !s.is_empty())
                && current["metadata"]["resourceVersion"].as_str() != Some(rv)
            {
                return status(
                    409,
                    "Conflict",
                    "the object has been modified; please apply your changes to the latest version and try again",
                );
            }
            inner.rv += 1;
            let rv = inner.rv;
            obj["metadata"]["resourceVersion"] = rv.to_string().into();
            obj["metadata"]["uid"] = current["metadata"]["uid"].clone();
            let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
            obj["metadata"]["generation"] = if obj["spec"] == current["spec"] {
                generation
            } else {
                generation + 1
            }
            .into();
            if t.namespaced {
                obj["metadata"]["namespace"] = ns.clone().into();
            }
            // As the API server, an update of the object leaves the status subresource alone
            // (tests that set status in the object they write still get theirs).
            if obj.get("status").is_none()
                && let Some(current_status) = current.get("status")
            {
                obj["status"] = current_status.clone();
            }
            let obj = Shared::store(&mut inner, &shared.events, &t, &ns, name, obj, "MODIFIED");
            axum::Json(obj).into_response()
        }
        (Method::DELETE, Some(name)) if t.coll == "/namespaces" => {
            // As the API server: the namespace turns Terminating, its objects are deleted, and
            // the namespace itself goes a moment later; meanwhile nothing can be created in it.
            let mut inner = shared.inner.lock().unwrap();
            let key = (String::new(), name.clone());
            let Some(mut obj) = inner
                .objects
                .get("/namespaces")
                .and_then(|m| m.get(&key))
                .cloned()
            else {
                return status(404, "NotFound", &format!("Namespace \"{name}\" not found"));
            };
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z".into();
            obj["status"] = json!({"phase": "Terminating"});
            inner.rv += 1;
            obj["metadata"]["resourceVersion"] = inner.rv.to_string().into();
            let obj = Shared::store(
                &mut inner,
                &shared.events,
                &t,
                "",
                name.clone(),
                obj,
                "MODIFIED",
            );
            let contents: Vec<(String, (String, String))> = inner
                .objects
                .iter()
                .flat_map(|(coll, m)| {
                    m.keys()
                        .filter(|(ns, _)| ns == &name)
                        .map(|k| (coll.clone(), k.clone()))
                        .collect::<Vec<_>>()
                })
                .collect();
            for (coll, k) in contents {
                if let Some(mut gone) = inner.objects.get_mut(&coll).and_then(|m| m.remove(&k)) {
                    inner.rv += 1;
                    gone["metadata"]["resourceVersion"] = inner.rv.to_string().into();
                    Shared::record(&mut inner, &shared.events, &coll, &k.0, "DELETED", gone);
                }
            }
            drop(inner);
            let later = shared.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let mut inner = later.inner.lock().unwrap();
                if let Some(mut gone) = inner
                    .objects
                    .get_mut("/namespaces")
                    .and_then(|m| m.remove(&key))
                {
                    inner.rv += 1;
                    gone["metadata"]["resourceVersion"] = inner.rv.to_string().into();
                    Shared::record(
                        &mut inner,
                        &later.events,
                        "/namespaces",
                        "",
                        "DELETED",
                        gone,
                    );
                }
            });
            axum::Json(obj).into_response()
        }
        (Method::DELETE, Some(name)) => {
            let ns = t.ns.clone().unwrap_or_default();
            let mut inner = shared.inner.lock().unwrap();
            let Some(mut obj) = inner
                .objects
                .get_mut(&t.coll)
                .and_then(|m| m.remove(&(ns.clone(), name.clone())))
            else {
                return status(404, "NotFound", &format!("{} \"{name}\" not found", t.kind));
            };
            inner.rv += 1;
            obj["metadata"]["resourceVersion"] = inner.rv.to_string().into();
            Shared::record(
                &mut inner,
                &shared.events,
                &t.coll,
                &ns,
                "DELETED",
                obj.clone(),
            );
            axum::Json(obj).into_response()
        }
        _ => status(405, "MethodNotAllowed", "not supported by the fake"),
    }
}

async fn watch_response(shared: Arc<Shared>, t: Target, q: HashMap<String, String>) -> Response {
    // Paused watches wait here (the epoch is odd while paused).
    let mut epoch_rx = shared.watch_epoch.subscribe();
    while *epoch_rx.borrow_and_update() % 2 == 1 {
        if epoch_rx.changed().await.is_err() {
            break;
        }
    }
    let epoch = *epoch_rx.borrow();
    let from: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(290u64);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let line = |v: Value| Ok::<_, std::io::Error>(Bytes::from(format!("{v}\n")));
    let (replay, mut live, expired, mut current_rv) = {
        let inner = shared.inner.lock().unwrap();
        let expired = from != 0 && from < inner.compacted;
        let replay: Vec<Event> = inner
            .log
            .iter()
            .filter(|e| e.rv > from && e.coll == t.coll)
            .cloned()
            .collect();
        (replay, shared.events.subscribe(), expired, inner.rv)
    };
    let matches = {
        let t_ns = t.ns.clone();
        let q = q.clone();
        move |e: &Event, coll: &str| {
            e.coll == coll
                && t_ns.as_ref().is_none_or(|n| *n == e.ns)
                && matches_selectors(&e.obj, &q)
        }
    };
    let coll = t.coll.clone();
    let api_version = Shared::api_version(&t);
    let kind = t.kind.clone();
    tokio::spawn(async move {
        if expired {
            let _ = tx
                .send(line(json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "too old resource version", "reason": "Expired", "code": 410}})))
                .await;
            return;
        }
        let present = |mut o: Value| {
            o["apiVersion"] = api_version.clone().into();
            o["kind"] = kind.clone().into();
            o
        };
        for e in replay.into_iter().filter(|e| matches(e, &coll)) {
            if tx
                .send(line(json!({"type": e.kind, "object": present(e.obj)})))
                .await
                .is_err()
            {
                return;
            }
        }
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(deadline);
        let mut bookmark = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = epoch_rx.changed() => if *epoch_rx.borrow() != epoch { return },
                _ = bookmark.tick(), if bookmarks => {
                    let obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": current_rv.to_string()}});
                    if tx.send(line(json!({"type": "BOOKMARK", "object": obj}))).await.is_err() { return }
                }
                ev = live.recv() => match ev {
                    Ok(e) => {
                        current_rv = current_rv.max(e.rv);
                        if e.rv > from && matches(&e, &coll) && tx.send(line(json!({"type": e.kind, "object": present(e.obj)}))).await.is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                },
            }
        }
    });
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .unwrap()
}

impl FakeApi {
    pub fn start() -> FakeApi {
        FakeApi::start_with(None)
    }

    /// The fake as a pod sees the API server: HTTPS with its own CA, every request authenticated
    /// by a bearer token, and a service-account directory (`sa_dir`: token, ca.crt, namespace) as
    /// the kubelet mounts it. `KUBERNETES_SERVICE_HOST`/`PORT` come from `addr`.
    pub fn start_in_cluster(namespace: &str) -> FakeApi {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "fake-apiserver-ca");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let server_key = rcgen::KeyPair::generate().unwrap();
        let mut server_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        server_params.subject_alt_names = vec![rcgen::SanType::IpAddress(std::net::IpAddr::V4(
            std::net::Ipv4Addr::LOCALHOST,
        ))];
        let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![server_cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        )
        .unwrap();
        let fake = FakeApi::start_with(Some((Arc::new(tls), ca_cert.pem())));
        let sa = fake.sa_dir();
        std::fs::create_dir_all(&sa).unwrap();
        std::fs::write(sa.join("ca.crt"), ca_cert.pem()).unwrap();
        std::fs::write(sa.join("namespace"), namespace).unwrap();
        fake.rotate_api_token("first-projected-token");
        fake
    }

    /// The plain fake, or with `tls` (server config, CA PEM) the in-cluster one, whose kubeconfig
    /// trusts that CA and carries an administrator's token.
    fn start_with(tls: Option<(Arc<rustls::ServerConfig>, String)>) -> FakeApi {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (events, _) = broadcast::channel(100_000);
        let shared = Arc::new(Shared {
            inner: Mutex::default(),
            events,
            watch_epoch: watch::channel(0).0,
            unblocked: tokio::sync::Notify::new(),
        });
        if tls.is_some() {
            shared.inner.lock().unwrap().api_tokens = Some(vec![ADMIN_TOKEN.to_string()]);
        }
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let (server, user) = match tls {
            None => {
                runtime.spawn(async move {
                    let _ = axum::serve(listener, app).await;
                });
                (format!("server: \"http://{addr}\""), String::new())
            }
            Some((tls, ca_pem)) => {
                use base64::Engine;
                runtime.spawn(serve_tls(listener, app, tls));
                let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
                (
                    format!("server: \"https://{addr}\", certificate-authority-data: {ca}"),
                    format!("token: {ADMIN_TOKEN}"),
                )
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{{server}}}}}]\nusers: [{{name: fake, user: {{{user}}}}}]\ncontexts: [{{name: fake, context: {{cluster: fake, user: fake, namespace: default}}}}]\ncurrent-context: fake\n"
            ),
        )
        .unwrap();
        FakeApi {
            addr,
            kubeconfig,
            shared,
            _dir: dir,
            runtime: Some(runtime),
        }
    }

    /// The service-account directory of the in-cluster mode.
    pub fn sa_dir(&self) -> PathBuf {
        self._dir.path().join("serviceaccount")
    }

    /// What the kubelet does when it refreshes a projected token: the new token replaces the
    /// file at once (by rename, so no reader sees half a token) and the API accepts it. Older
    /// tokens stay valid until `revoke_api_token`, as they do until they expire.
    pub fn rotate_api_token(&self, token: &str) {
        let sa = self.sa_dir();
        let next = sa.join(".token.next");
        std::fs::write(&next, token).unwrap();
        std::fs::rename(&next, sa.join("token")).unwrap();
        let mut inner = self.shared.inner.lock().unwrap();
        inner
            .api_tokens
            .get_or_insert_with(Vec::new)
            .push(token.to_string());
    }

    /// The API refuses `token` from now on (it expired).
    pub fn revoke_api_token(&self, token: &str) {
        if let Some(tokens) = self.shared.inner.lock().unwrap().api_tokens.as_mut() {
            tokens.retain(|t| t != token);
        }
    }

    /// How many requests `token` authenticated.
    pub fn api_token_uses(&self, token: &str) -> u64 {
        let inner = self.shared.inner.lock().unwrap();
        inner.token_uses.get(token).copied().unwrap_or(0)
    }

    /// The next `n` requests whose path starts with `prefix` fail with `code` (e.g. 429).
    /// How many status subresource writes the fake has served.
    pub fn status_writes(&self) -> u64 {
        self.shared.inner.lock().unwrap().status_writes
    }

    /// Ends every injected failure (an outage made with `fail_next(.., usize::MAX)`).
    pub fn end_failures(&self) {
        self.shared.inner.lock().unwrap().failures.clear();
    }

    pub fn fail_next(&self, prefix: &str, code: u16, n: usize) {
        self.shared
            .inner
            .lock()
            .unwrap()
            .failures
            .push((prefix.to_string(), code, n));
    }

    /// Lists under `prefix` hang until `unblock`.
    pub fn block_lists(&self, prefix: &str) {
        self.shared
            .inner
            .lock()
            .unwrap()
            .blocked
            .push(prefix.to_string());
    }

    pub fn unblock_lists(&self) {
        self.shared.inner.lock().unwrap().blocked.clear();
        self.shared.unblocked.notify_waiters();
    }

    /// Closes every open watch; new watches wait until `resume_watches`.
    pub fn pause_watches(&self) {
        self.shared
            .watch_epoch
            .send_modify(|e| *e = if *e % 2 == 0 { *e + 1 } else { *e });
    }

    pub fn resume_watches(&self) {
        self.shared
            .watch_epoch
            .send_modify(|e| *e = if *e % 2 == 1 { *e + 1 } else { *e });
    }

    /// A service-account token TokenReview accepts for `audiences`.
    pub fn add_token(
        &self,
        token: &str,
        namespace: &str,
        service_account: &str,
        audiences: &[&str],
    ) {
        let user =
            json!({"username": format!("system:serviceaccount:{namespace}:{service_account}")});
        self.vouch(token, audiences, user);
    }

    /// Makes TokenReview accept `token` for `audiences` as `user`.
    fn vouch(&self, token: &str, audiences: &[&str], user: Value) {
        let status = json!({"authenticated": true, "audiences": audiences, "user": user});
        self.shared
            .inner
            .lock()
            .unwrap()
            .tokens
            .insert(token.into(), status);
    }

    /// A token bound to a pod, as projected service-account tokens are: TokenReview names the pod.
    pub fn add_pod_token(
        &self,
        token: &str,
        namespace: &str,
        service_account: &str,
        pod: (&str, &str),
    ) {
        let user = json!({"username": format!("system:serviceaccount:{namespace}:{service_account}"),
                          "extra": {"authentication.kubernetes.io/pod-name": [pod.0],
                                    "authentication.kubernetes.io/pod-uid": [pod.1]}});
        self.vouch(token, &["istio-ca"], user);
    }

    /// SubjectAccessReview refuses everything for this service account (as a cluster whose RBAC
    /// grants it nothing).
    pub fn refuse_access(&self, namespace: &str, service_account: &str) {
        self.shared
            .inner
            .lock()
            .unwrap()
            .refused_users
            .push(format!(
                "system:serviceaccount:{namespace}:{service_account}"
            ));
    }

    /// A token TokenReview rejects with `error` (expired, revoked...).
    pub fn reject_token(&self, token: &str, error: &str) {
        self.shared.inner.lock().unwrap().tokens.insert(
            token.into(),
            json!({"authenticated": false, "error": error}),
        );
    }

    /// Drops watch history: a watch from an older resourceVersion gets `410 Expired`.
    pub fn compact(&self) {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.compacted = inner.rv;
        inner.log.clear();
    }
}

/// Serves `app` over TLS, HTTP/1.1 or HTTP/2 as the client offers.
async fn serve_tls(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Arc<rustls::ServerConfig>,
) {
    let mut tls = (*tls).clone();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    while let Ok((tcp, _)) = listener.accept().await {
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
        });
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
