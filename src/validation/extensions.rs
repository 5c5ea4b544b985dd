//! Rules for telemetry.istio.io and extensions.istio.io kinds (Telemetry, WasmPlugin,
//! TrafficExtension) and networking.istio.io's ProxyConfig.

use super::helpers as h;
use super::report::Report;
use super::security::selector_without_labels;
use crate::config::telemetry::{CustomTag, TagOperation, Telemetry};

pub fn telemetry(r: &mut Report, t: &Telemetry) {
    r.check("spec.selector", h::workload_selector(t.selector.as_ref()));
    for e in h::policy_targets(t.selector.is_some(), t.target_ref.as_ref(), &t.target_refs) {
        r.error("spec", e);
    }
    selector_without_labels(r, t.selector.as_ref());
    let providers = t
        .tracing
        .iter()
        .enumerate()
        .flat_map(|(i, x)| {
            x.providers
                .iter()
                .map(move |p| (format!("spec.tracing[{i}].providers"), p))
        })
        .chain(t.metrics.iter().enumerate().flat_map(|(i, x)| {
            x.providers
                .iter()
                .map(move |p| (format!("spec.metrics[{i}].providers"), p))
        }))
        .chain(t.access_logging.iter().enumerate().flat_map(|(i, x)| {
            x.providers
                .iter()
                .map(move |p| (format!("spec.accessLogging[{i}].providers"), p))
        }));
    for (path, p) in providers {
        if p.name.is_empty() {
            r.error(path, "providers.name may not be empty");
        }
    }
    // As istiod: a filter's expression must parse as CEL (an empty one does not); and, unlike
    // istiod, without the comprehension macros Envoy's CEL filter refuses (docs/decisions.md).
    for (i, l) in t.access_logging.iter().enumerate() {
        if let Some(filter) = &l.filter
            && let Err(e) = super::cel::check_for_envoy(&filter.expression)
        {
            r.error(
                format!("spec.accessLogging[{i}].filter.expression"),
                format!("must be a valid CEL expression, {e}"),
            );
        }
    }
    if t.tracing.len() > 1 {
        r.warn(
            "spec.tracing",
            "multiple tracing is not currently supported",
        );
    }
    for (i, tr) in t.tracing.iter().enumerate() {
        let tp = format!("spec.tracing[{i}]");
        if tr.providers.len() > 1 {
            r.warn(
                format!("{tp}.providers"),
                "multiple providers is not currently supported",
            );
        }
        if let Some(p) = tr.random_sampling_percentage
            && !(0.0..=100.0).contains(&p)
        {
            r.error(
                format!("{tp}.randomSamplingPercentage"),
                "randomSamplingPercentage must be in range [0.0, 100.0]",
            );
        }
        for (name, tag) in &tr.custom_tags {
            let empty = match tag {
                CustomTag::Literal(l) => l.value.is_empty(),
                CustomTag::Environment(e) => e.name.is_empty(),
                CustomTag::Header(hd) => hd.name.is_empty(),
                // istiod does not check a formatter's value.
                CustomTag::Formatter(_) => false,
            };
            if name.is_empty() || empty {
                r.error(
                    format!("{tp}.customTags.{name}"),
                    "custom tag must have a name and a value source",
                );
            }
        }
    }
    for (i, m) in t.metrics.iter().enumerate() {
        let mp = format!("spec.metrics[{i}]");
        for (j, o) in m.overrides.iter().enumerate() {
            let op = format!("{mp}.overrides[{j}]");
            if let Some(sel) = &o.match_
                && sel.metric.is_some()
                && sel.custom_metric.is_some()
            {
                r.error(
                    format!("{op}.match"),
                    "only one of metric or customMetric may be set",
                );
            }
            if let Some(sel) = &o.match_
                && sel.custom_metric.as_deref() == Some("")
            {
                r.error(
                    format!("{op}.match.customMetric"),
                    "customMetric may not be empty",
                );
            }
            for (tag, to) in &o.tag_overrides {
                let tp = format!("{op}.tagOverrides.{tag}");
                if tag.is_empty() {
                    r.warn(&tp, "tagOverrides.name may not be empty");
                }
                let value = to.value.as_deref().unwrap_or_default();
                match to.operation {
                    TagOperation::UPSERT if value.is_empty() => r.error(
                        tp,
                        "tagOverrides.value must be set when operation is UPSERT",
                    ),
                    TagOperation::REMOVE if !value.is_empty() => r.error(
                        tp,
                        "tagOverrides.value may only be set when operation is UPSERT",
                    ),
                    _ => {}
                }
            }
        }
    }
}

pub fn wasm_plugin(r: &mut Report, w: &crate::config::extensions::WasmPlugin) {
    r.check("spec.selector", h::workload_selector(w.selector.as_ref()));
    for e in h::policy_targets(w.selector.is_some(), w.target_ref.as_ref(), &w.target_refs) {
        r.error("spec", e);
    }
    selector_without_labels(r, w.selector.as_ref());
    wasm_module(
        r,
        "spec",
        &WasmModule {
            url: &w.url,
            sha256: &w.sha256,
            image_pull_secret: &w.image_pull_secret,
            plugin_name: &w.plugin_name,
            vm_config: w.vm_config.as_ref(),
        },
    );
    match_ports(r, &w.matches);
}

/// What WasmPlugin and a TrafficExtension's `wasm` share.
struct WasmModule<'a> {
    url: &'a str,
    sha256: &'a str,
    image_pull_secret: &'a str,
    plugin_name: &'a str,
    vm_config: Option<&'a crate::config::extensions::VmConfig>,
}

/// istiod's checks of a Wasm module's fields, reported under `at` (`spec`, `spec.wasm`).
fn wasm_module(r: &mut Report, at: &str, w: &WasmModule) {
    r.check(format!("{at}.url"), wasm_url(w.url));
    if !w.sha256.is_empty() {
        if w.sha256.len() != 64 {
            r.error(
                format!("{at}.sha256"),
                "sha256 field must be 64 characters long",
            );
        } else if !w
            .sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            r.error(
                format!("{at}.sha256"),
                "sha256 field must match [a-f0-9]{64} pattern",
            );
        }
    }
    if w.image_pull_secret.len() > 253 {
        r.error(
            format!("{at}.imagePullSecret"),
            "imagePullSecret field must be less than 253 characters long",
        );
    }
    if w.plugin_name.len() > 256 {
        r.error(
            format!("{at}.pluginName"),
            "pluginName field must be less than 255 characters long",
        );
    }
    if let Some(vm) = w.vm_config {
        let mut seen = std::collections::HashSet::new();
        for (i, env) in vm.env.iter().enumerate() {
            let ep = format!("{at}.vmConfig.env[{i}]");
            if env.name.is_empty() {
                r.error(ep, "spec.vmConfig.env invalid");
                break;
            }
            if env.name.len() > 256 {
                r.error(ep, "env.name field must be less than 255 characters long");
                break;
            }
            if !seen.insert(env.name.as_str()) {
                r.error(ep, "duplicate env");
                break;
            }
            if env
                .value_from
                .is_some_and(|v| v != crate::config::extensions::EnvValueSource::INLINE)
                && !env.value.is_empty()
            {
                r.error(ep, "value may only be set when valueFrom is INLINE");
                break;
            }
        }
    }
}

/// Match ports in range, as istiod checks a plugin's `match`.
fn match_ports(r: &mut Report, matches: &[crate::config::extensions::TrafficSelector]) {
    for (i, sel) in matches.iter().enumerate() {
        for (j, p) in sel.ports.iter().enumerate() {
            if !(1..=65535).contains(&p.number) {
                r.error(
                    format!("spec.match[{i}].ports[{j}]"),
                    format!("spec.Match[{i}].Ports[{j}] is out of range: {}", p.number),
                );
            }
        }
    }
}

/// istiod's ValidateTrafficExtension: exactly one of wasm and lua, one kind of selection, the
/// module's or script's fields, match ports.
pub fn traffic_extension(r: &mut Report, t: &crate::config::extensions::TrafficExtension) {
    if t.wasm.is_some() == t.lua.is_some() {
        r.error("spec", "exactly one of wasm or lua must be set");
    }
    r.check("spec.selector", h::workload_selector(t.selector.as_ref()));
    for e in h::policy_targets(t.selector.is_some(), None, &t.target_refs) {
        r.error("spec", e);
    }
    selector_without_labels(r, t.selector.as_ref());
    if let Some(lua) = &t.lua {
        if lua.inline_code.is_empty() {
            r.error("spec.lua.inlineCode", "lua.inlineCode cannot be empty");
        } else if lua.inline_code.len() > 65536 {
            r.error(
                "spec.lua.inlineCode",
                "lua.inlineCode exceeds maximum size of 64KB",
            );
        }
    }
    if let Some(w) = &t.wasm {
        wasm_module(
            r,
            "spec.wasm",
            &WasmModule {
                url: &w.url,
                sha256: &w.sha256,
                image_pull_secret: &w.image_pull_secret,
                plugin_name: &w.plugin_name,
                vm_config: w.vm_config.as_ref(),
            },
        );
    }
    match_ports(r, &t.matches);
}

/// A plugin URL: `oci://`, `http(s)://`, `file://`, or a bare image reference (read as OCI).
fn wasm_url(url: &str) -> Result<(), String> {
    if url.is_empty() {
        return Err("url field needs to be set".into());
    }
    let parsed = url::Url::parse(url).or_else(|_| url::Url::parse(&format!("http://{url}")));
    match parsed {
        Err(e) => Err(format!("failed to parse url: {e}")),
        Ok(u) if !["file", "http", "https", "oci"].contains(&u.scheme()) => {
            Err(format!("url contains unsupported scheme: {}", u.scheme()))
        }
        Ok(_) => Ok(()),
    }
}

pub fn proxy_config(r: &mut Report, p: &crate::config::networking::ProxyConfig) {
    r.check("spec.selector", h::workload_selector(p.selector.as_ref()));
    selector_without_labels(r, p.selector.as_ref());
    if p.concurrency.is_some_and(|c| c < 0) {
        r.error(
            "spec.concurrency",
            "concurrency must be greater than or equal to 0",
        );
    }
}
