//! ControlZ, as istiod serves it on 9876 (loopback by default, reached through a port-forward):
//! `istioctl admin log` reads and sets log levels through `/scopej/`, and `istioctl dashboard
//! controlz` opens its page. Rudder serves the topics istioctl and people use: scopes (the log
//! levels), and the process, its arguments, environment and version.

use crate::logging::ScopeLevel;
use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;

pub fn router() -> Router {
    Router::new()
        .route("/", get(home))
        .route("/scopej", get(scopes))
        .route("/scopej/", get(scopes))
        .route("/scopej/{scope}", get(scope).put(set_scope))
        .route("/procj/", get(process))
        .route("/argsj/", get(arguments))
        .route("/envj/", get(environment))
        .route("/versionj/", get(version))
}

/// ControlZ's JSON topics, also served under the debug port's `/debug/controlz` for the debug UI.
pub fn json_router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/scopej/", get(scopes))
        .route("/scopej/{scope}", get(scope).put(set_scope))
        .route("/procj/", get(process))
        .route("/argsj/", get(arguments))
        .route("/envj/", get(environment))
        .route("/versionj/", get(version))
}

async fn scopes() -> Json<Vec<ScopeLevel>> {
    Json(crate::logging::scopes())
}

async fn scope(Path(name): Path<String>) -> Response {
    match crate::logging::scopes()
        .into_iter()
        .find(|s| s.name == name)
    {
        Some(s) => Json(s).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no scope {name:?}\n")).into_response(),
    }
}

/// istioctl sends the whole `ScopeInfo`; only `output_level` is acted on (Rudder writes no stack
/// traces nor callers). 202 Accepted, as istiod answers.
async fn set_scope(Path(name): Path<String>, Json(info): Json<ScopeLevel>) -> Response {
    if !crate::logging::scopes().iter().any(|s| s.name == name) {
        return (StatusCode::NOT_FOUND, format!("no scope {name:?}\n")).into_response();
    }
    if info.output_level.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    match crate::logging::set_scope(&name, &info.output_level) {
        Ok(filter) => {
            tracing::info!(
                scope = name,
                level = info.output_level,
                filter,
                "log level changed"
            );
            StatusCode::ACCEPTED.into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

async fn process() -> Json<serde_json::Value> {
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0);
    Json(serde_json::json!({
        "pid": std::process::id(),
        "ppid": std::os::unix::process::parent_id(),
        "cwd": cwd,
        "hostname": hostname,
        "tempdir": std::env::temp_dir().display().to_string(),
        "threads": threads,
    }))
}

async fn arguments() -> Json<Vec<String>> {
    Json(std::env::args().collect())
}

/// The environment, with the values of variables that may hold credentials left out.
async fn environment() -> Json<Vec<serde_json::Value>> {
    let secret = |name: &str| {
        let upper = name.to_ascii_uppercase();
        ["SECRET", "TOKEN", "PASSWORD", "KEY", "CREDENTIAL"]
            .iter()
            .any(|w| upper.contains(w))
    };
    let mut vars: Vec<(String, String)> = std::env::vars().collect();
    vars.sort();
    Json(
        vars.into_iter()
            .map(|(name, value)| {
                let value = if secret(&name) {
                    "(hidden)".to_string()
                } else {
                    value
                };
                serde_json::json!({"name": name, "value": value})
            })
            .collect(),
    )
}

async fn version() -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "gitRevision": "",
        "buildStatus": "Clean",
        "component": "rudder",
    }))
}

/// ControlZ's page: the scopes with a level each can be set to, and the process topics.
async fn home() -> Response {
    let rows: String = crate::logging::scopes()
        .iter()
        .map(|s| {
            let options: String = ["none", "error", "warn", "info", "debug"]
                .iter()
                .map(|l| {
                    let selected = if *l == s.output_level { " selected" } else { "" };
                    format!("<option{selected}>{l}</option>")
                })
                .collect();
            format!(
                "<tr><td>{name}</td><td>{desc}</td><td><select data-scope=\"{name}\">{options}</select></td></tr>",
                name = html_escape(&s.name),
                desc = html_escape(&s.description),
            )
        })
        .collect();
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Rudder ControlZ</title></head><body>\
<h1>Rudder ControlZ</h1><p>The same as istiod's ControlZ: log levels by scope, and the process. The debug UI is on the monitoring port (15014, <code>/debug</code>).</p>\
<h2>Logging scopes</h2><table><thead><tr><th>scope</th><th>what</th><th>level</th></tr></thead><tbody>{rows}</tbody></table>\
<h2>Process</h2><ul><li><a href=\"/procj/\">process</a></li><li><a href=\"/argsj/\">arguments</a></li><li><a href=\"/envj/\">environment</a></li><li><a href=\"/versionj/\">version</a></li></ul>\
<script>document.querySelectorAll('select[data-scope]').forEach(function (s) {{ s.addEventListener('change', function () {{\
fetch('/scopej/' + s.dataset.scope, {{method: 'PUT', headers: {{'content-type': 'application/json'}}, body: JSON.stringify({{name: s.dataset.scope, output_level: s.value}})}}); }}); }});</script>\
</body></html>"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
