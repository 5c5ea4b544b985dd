//! Logging setup with a filter that can be changed at runtime (as `istioctl admin log` does for istiod),
//! through `/debug/log` or `rudder log`.

use std::sync::OnceLock;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

type Handle = reload::Handle<EnvFilter, Registry>;

static HANDLE: OnceLock<(Handle, std::sync::Mutex<String>)> = OnceLock::new();

/// Istio's scope names, mapped to Rudder's modules; anything else is used as a target as given.
const SCOPES: &[(&str, &str)] = &[
    ("ads", "rudder::xds"),
    ("xds", "rudder::xds"),
    ("kube", "rudder::k8s"),
    ("ca", "rudder::ca"),
    ("validation", "rudder::validation"),
    ("file", "rudder::source"),
    ("model", "rudder::model"),
];

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
            Some(s) => {
                let target = SCOPES
                    .iter()
                    .find(|(name, _)| *name == s)
                    .map_or(s, |(_, t)| *t);
                parts.push(format!("{target}={level}"));
            }
        }
    }
    if parts.is_empty() {
        return Err("empty log level".into());
    }
    let filter = parts.join(",");
    EnvFilter::try_new(&filter).map_err(|e| e.to_string())?;
    Ok(filter)
}

pub fn init(level: &str, json: bool, ansi: bool) {
    let initial = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| level.to_string());
    let filter = EnvFilter::try_new(&initial).unwrap_or_else(|_| EnvFilter::new("info"));
    let (layer, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(layer);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    if json {
        registry.with(fmt.json()).init();
    } else {
        registry.with(fmt).init();
    }
    let _ = HANDLE.set((handle, std::sync::Mutex::new(initial)));
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
        assert!(to_filter("").is_err());
    }
}
