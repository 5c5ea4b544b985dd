//! Logging setup with a filter that can be changed at runtime (as `istioctl admin log` does for istiod),
//! through `/debug/log` or `rudder log`.

use std::sync::OnceLock;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

type Handle = reload::Handle<EnvFilter, Registry>;

static HANDLE: OnceLock<(Handle, std::sync::Mutex<String>)> = OnceLock::new();

/// Istio's scope names, mapped to the Rudder module that does that work (the first name of a module
/// is what JSON log lines call it). Istio scopes for work Rudder does not do are refused.
const SCOPES: &[(&str, &str)] = &[
    ("ads", "rudder::xds"),
    ("xds", "rudder::xds"),
    ("delta", "rudder::xds"),
    ("grpcgen", "rudder::xds"),
    ("authorization", "rudder::xds"),
    ("authn", "rudder::xds"),
    ("gateway", "rudder::xds"),
    ("kube", "rudder::k8s"),
    ("klog", "rudder::k8s"),
    ("controllers", "rudder::k8s"),
    ("status", "rudder::k8s"),
    ("ca", "rudder::ca"),
    ("security", "rudder::ca"),
    ("spiffe", "rudder::ca"),
    ("trustBundle", "rudder::ca"),
    ("validation", "rudder::validation"),
    ("webhook", "rudder::webhook"),
    ("validationServer", "rudder::webhook"),
    ("inject", "rudder::webhook"),
    ("file", "rudder::source"),
    ("model", "rudder::model"),
    ("serviceentry", "rudder::model"),
    ("wle", "rudder::model"),
    ("monitor", "rudder::admin"),
];

/// Crates whose own log lines may be asked for by name (`h2:debug`, `rustls=trace`).
const CRATES: &[&str] = &[
    "h2",
    "hyper",
    "hyper_util",
    "tonic",
    "tower",
    "kube",
    "kube_client",
    "kube_runtime",
    "rustls",
    "tokio_rustls",
    "notify",
    "rudder",
];

/// The tracing target a scope name stands for; an error naming the known scopes for any other.
fn target_of(scope: &str) -> Result<&str, String> {
    if let Some((_, target)) = SCOPES.iter().find(|(name, _)| *name == scope) {
        return Ok(target);
    }
    let krate = scope.split("::").next().unwrap_or(scope);
    if CRATES.contains(&krate) {
        return Ok(scope);
    }
    let known: Vec<&str> = SCOPES.iter().map(|(name, _)| *name).collect();
    Err(format!(
        "unknown scope {scope:?}; Rudder's scopes: default, {} (or a module such as rudder::xds)",
        known.join(", ")
    ))
}

/// Turns `ads:debug,default:info` (istioctl style) or `rudder::xds=debug,info` into a filter string.
pub fn to_filter(spec: &str) -> Result<String, String> {
    let mut parts = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        // `target=level` (tracing) or `scope:level` (istioctl); targets themselves contain `::`.
        let split = if item.contains('=') {
            item.split_once('=')
        } else {
            item.rsplit_once(':')
        };
        let (scope, level) = match split {
            Some((s, l)) => (Some(s), l),
            None => (None, item),
        };
        let level = level.to_ascii_lowercase();
        if !matches!(
            level.as_str(),
            "trace" | "debug" | "info" | "warn" | "error" | "off" | "none"
        ) {
            return Err(format!(
                "unknown level {level:?} (trace, debug, info, warn, error, none)"
            ));
        }
        let level = if level == "none" {
            "off".to_string()
        } else {
            level
        };
        match scope {
            None | Some("default") | Some("all") => parts.push(level),
            Some(s) => parts.push(format!("{}={level}", target_of(s)?)),
        }
    }
    if parts.is_empty() {
        return Err("empty log level".into());
    }
    let filter = parts.join(",");
    EnvFilter::try_new(&filter).map_err(|e| e.to_string())?;
    Ok(filter)
}

/// Starts logging at `level`: istiod's scope form (`default:info,ads:debug`, what its chart and
/// `--log_output_level` pass) or a tracing filter (`rudder::xds=debug,info`); `RUST_LOG`, when
/// set, wins. A level neither form reads logs at `info` and says so on the first line.
pub fn init(level: &str, json: bool, ansi: bool) {
    let (initial, refused) = match std::env::var("RUST_LOG").ok().filter(|s| !s.is_empty()) {
        Some(filter) => match EnvFilter::try_new(&filter) {
            Ok(_) => (filter, None),
            Err(e) => ("info".to_string(), Some((filter, e.to_string()))),
        },
        None => match to_filter(level) {
            Ok(filter) => (filter, None),
            Err(e) => ("info".to_string(), Some((level.to_string(), e))),
        },
    };
    let filter = EnvFilter::try_new(&initial).unwrap_or_else(|_| EnvFilter::new("info"));
    let (layer, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(layer);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .fmt_fields(EscapedFields);
    let quieted = QuietRepeats::default();
    if json {
        registry
            .with(fmt.event_format(IstioJson).with_filter(quieted))
            .init();
    } else {
        registry.with(fmt.with_filter(quieted)).init();
    }
    let _ = HANDLE.set((handle, std::sync::Mutex::new(initial)));
    if let Some((level, error)) = refused {
        tracing::warn!(level, error, "log level not understood; logging at info");
    }
}

/// Crates that log every failed API request themselves (kube's client logs each non-2xx
/// response at ERROR), which Rudder's own callers log with what they were doing: during an API
/// server outage each watcher retrying every second wrote a line per retry, hundreds in seconds.
const REPEATING_TARGETS: &[&str] = &["kube_client", "kube_runtime"];

/// How often one log statement of a `REPEATING_TARGETS` crate may write a line.
const REPEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Lets a log statement of the crates in `REPEATING_TARGETS` through at most once per
/// `REPEAT_EVERY` (Rudder's own watchers rate-limit their lines the same way); everything else
/// passes untouched.
#[derive(Default, Clone)]
pub struct QuietRepeats {
    last: std::sync::Arc<
        std::sync::Mutex<
            std::collections::HashMap<tracing::callsite::Identifier, std::time::Instant>,
        >,
    >,
}

impl<S: tracing::Subscriber> tracing_subscriber::layer::Filter<S> for QuietRepeats {
    fn enabled(
        &self,
        _meta: &tracing::Metadata<'_>,
        _cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        true
    }

    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        let meta = event.metadata();
        if !REPEATING_TARGETS
            .iter()
            .any(|t| meta.target() == *t || meta.target().starts_with(&format!("{t}::")))
        {
            return true;
        }
        let now = std::time::Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match last.get(&meta.callsite()) {
            Some(at) if now.duration_since(*at) < REPEAT_EVERY => false,
            _ => {
                last.insert(meta.callsite(), now);
                true
            }
        }
    }
}

/// Event and span fields for text log lines, every value with its control characters escaped:
/// a node id, CSR subject, header or object name a client chose cannot end the line and forge
/// the next one (`\n`), rewrite the terminal (ESC sequences), or hide text (`\r`). JSON lines
/// are escaped by the JSON encoder itself.
pub struct EscapedFields;

impl<'writer> tracing_subscriber::fmt::FormatFields<'writer> for EscapedFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: tracing_subscriber::fmt::format::Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        let mut visitor = EscapingVisitor {
            writer: &mut writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct EscapingVisitor<'a, 'writer> {
    writer: &'a mut tracing_subscriber::fmt::format::Writer<'writer>,
    first: bool,
    result: std::fmt::Result,
}

impl tracing::field::Visit for EscapingVisitor<'_, '_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let formatted = format!("{value:?}");
        let text = escape_controls(&formatted);
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = match field.name() {
            "message" => write!(self.writer, "{separator}{text}"),
            name => write!(
                self.writer,
                "{separator}{}={text}",
                name.strip_prefix("r#").unwrap_or(name)
            ),
        };
    }
}

/// `text` with every control character (C0, DEL, C1) and the Unicode line and paragraph
/// separators written as escapes (`\n`, `\r`, `\t`, `\u{1b}`), so it stays on one line and
/// cannot drive a terminal.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let needs = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
    if !text.chars().any(needs) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The Istio scope a log line of `target` belongs to: the scope `SCOPES` maps to its module, else
/// the module under `rudder::` (`webhook`, `admin`, ...), else the crate.
fn scope_of(target: &str) -> &str {
    if let Some((scope, _)) = SCOPES
        .iter()
        .find(|(_, module)| target == *module || target.starts_with(&format!("{module}::")))
    {
        return scope;
    }
    let mut parts = target.split("::");
    match (parts.next(), parts.next()) {
        (Some("rudder"), Some(module)) => module,
        (Some(krate), _) => krate,
        _ => target,
    }
}

/// An event's fields as JSON values.
#[derive(Default)]
struct JsonFields(serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for JsonFields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

/// istiod's JSON log lines (`--log_as_json`): `time` (RFC 3339, UTC), `level` (lower case),
/// `scope`, `msg`, then the event's own fields, and the spans it happened in (`span`).
struct IstioJson;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for IstioJson
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let mut line = serde_json::Map::new();
        let time = ::time::OffsetDateTime::now_utc()
            .format(&::time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        line.insert("time".into(), time.into());
        line.insert(
            "level".into(),
            meta.level().as_str().to_ascii_lowercase().into(),
        );
        line.insert("scope".into(), scope_of(meta.target()).into());
        let msg = fields.0.remove("message").unwrap_or_default();
        line.insert("msg".into(), msg);
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<String> = scope
                .from_root()
                .map(|span| {
                    let ext = span.extensions();
                    match ext.get::<tracing_subscriber::fmt::FormattedFields<N>>() {
                        Some(f) if !f.is_empty() => format!("{}{{{f}}}", span.name()),
                        _ => span.name().to_string(),
                    }
                })
                .collect();
            if !spans.is_empty() {
                line.insert("span".into(), spans.join(":").into());
            }
        }
        for (k, v) in fields.0 {
            line.entry(k).or_insert(v);
        }
        writeln!(writer, "{}", serde_json::Value::Object(line))
    }
}

/// One Istio scope and the level it logs at now (ControlZ's `scopej`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScopeLevel {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_level: String,
    /// Rudder writes no stack traces: always `none`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stack_trace_level: String,
    #[serde(default)]
    pub log_callers: bool,
}

/// A filter's directives: the default level, and a level per target.
fn directives(filter: &str) -> (String, std::collections::BTreeMap<String, String>) {
    let mut default = "info".to_string();
    let mut targets = std::collections::BTreeMap::new();
    for d in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match d.split_once('=') {
            Some((target, level)) => {
                targets.insert(target.to_string(), level.to_string());
            }
            None => default = d.to_string(),
        }
    }
    (default, targets)
}

/// A tracing level as Istio names it (`off` is `none`).
fn istio_level(level: &str) -> String {
    match level {
        "off" => "none".into(),
        "trace" => "debug".into(),
        other => other.into(),
    }
}

/// Every Istio scope Rudder answers to (`default` first) with the level it logs at now.
pub fn scopes() -> Vec<ScopeLevel> {
    let (default, targets) = directives(&current());
    std::iter::once(("default", "the default for every scope not set on its own"))
        .chain(SCOPES.iter().map(|(name, module)| (*name, *module)))
        .map(|(name, module)| {
            let level = if name == "default" {
                default.clone()
            } else {
                targets
                    .get(module)
                    .cloned()
                    .unwrap_or_else(|| default.clone())
            };
            ScopeLevel {
                name: name.to_string(),
                description: if name == "default" {
                    module.to_string()
                } else {
                    format!("Rudder's {module}")
                },
                output_level: istio_level(&level),
                stack_trace_level: "none".into(),
                log_callers: false,
            }
        })
        .collect()
}

/// Sets one Istio scope's level (`none`, `error`, `warn`, `info`, `debug`), leaving the others as
/// they are; returns the filter now in force. Scopes served by the same Rudder module change
/// together (`ads`, `xds` and `delta` are all `rudder::xds`).
pub fn set_scope(scope: &str, level: &str) -> Result<String, String> {
    let single = to_filter(&format!("{scope}:{level}"))?;
    let (mut default, mut targets) = directives(&current());
    let (_, new_targets) = directives(&single);
    if new_targets.is_empty() {
        default = single;
    } else {
        targets.extend(new_targets);
    }
    let filter = std::iter::once(default)
        .chain(targets.into_iter().map(|(t, l)| format!("{t}={l}")))
        .collect::<Vec<_>>()
        .join(",");
    set(&filter)
}

/// The filter in force.
pub fn current() -> String {
    HANDLE
        .get()
        .map(|(_, cur)| cur.lock().unwrap_or_else(|p| p.into_inner()).clone())
        .unwrap_or_default()
}

/// Replaces the filter; takes effect for every following log line.
pub fn set(spec: &str) -> Result<String, String> {
    let filter = to_filter(spec)?;
    let (handle, cur) = HANDLE.get().ok_or("logging is not initialised")?;
    handle
        .reload(EnvFilter::try_new(&filter).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    *cur.lock().unwrap_or_else(|p| p.into_inner()) = filter.clone();
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::to_filter;

    /// A client-chosen value with a newline, a carriage return and an ANSI sequence stays on its
    /// log line, escaped, in the message and in every field of the event and its spans.
    #[test]
    fn client_values_cannot_forge_text_log_lines() {
        use tracing_subscriber::layer::SubscriberExt;
        #[derive(Clone, Default)]
        struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .fmt_fields(super::EscapedFields),
        );
        let forged = "sidecar~1.2.3.4~a.b~b.svc\n2026-01-01T00:00:00Z ERROR forged: CA key compromised\r\x1b[2K";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("ads", proxy = %forged);
            let _in = span.enter();
            tracing::warn!(node = %forged, debug = ?forged, "connection from {forged}");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains('\x1b') && !text.contains('\r'), "{text}");
        assert_eq!(
            text.matches("\\n2026-01-01T00:00:00Z ERROR forged").count(),
            4,
            "{text}"
        );
    }

    #[test]
    fn json_lines_name_the_istio_scope() {
        assert_eq!(super::scope_of("rudder::xds::server::stream"), "ads");
        assert_eq!(super::scope_of("rudder::k8s"), "kube");
        assert_eq!(super::scope_of("rudder::webhook::inject"), "webhook");
        assert_eq!(super::scope_of("h2::proto"), "h2");
    }

    #[test]
    fn istioctl_style_scopes_map_to_modules() {
        assert_eq!(
            to_filter("ads:debug,default:info").unwrap(),
            "rudder::xds=debug,info"
        );
        assert_eq!(to_filter("rudder::k8s=trace").unwrap(), "rudder::k8s=trace");
        assert_eq!(to_filter("warn").unwrap(), "warn");
        assert_eq!(to_filter("ca:none").unwrap(), "rudder::ca=off");
        assert!(to_filter("ads:loud").is_err());
        assert_eq!(to_filter("h2:debug").unwrap(), "h2=debug");
        let unknown = to_filter("nosuchscope:debug").unwrap_err();
        assert!(
            unknown.contains("unknown scope \"nosuchscope\""),
            "{unknown}"
        );
        assert!(
            to_filter("telemetry:debug").is_err(),
            "an Istio scope for work Rudder does not do"
        );
        assert!(to_filter("").is_err());
    }
}
