//! Every field of every Istio kind (`tests/fixtures/istio-fields.tsv`, from Istio's CRDs) is
//! either read by Rudder beyond parsing and validation (its Rust name is used in `src/` outside
//! `config` and `validation`), or listed as not honoured (`validation::unhonoured`, which warns
//! wherever config enters), or refused or warned by validation as istiod refuses or warns it
//! (listed below, each with istiod's word). A new field that nothing reads fails here instead of
//! being accepted and silently dropped.

use rudder::validation::unhonoured::UNHONOURED;
use std::collections::BTreeSet;
use std::path::Path;

const FIELDS: &str = include_str!("../fixtures/istio-fields.tsv");

/// Fields validation always refuses or warns about, as istiod does: setting them is never
/// silent.
const JUDGED_BY_VALIDATION: &[(&str, &str)] = &[
    // "HTTP/2 abort fault injection not supported yet" (denied).
    ("VirtualService", "http[].fault.abort.http2Error"),
    // "exponentialDelay not supported yet" (denied).
    ("VirtualService", "http[].fault.delay.exponentialDelay"),
    // "outlier detection consecutive errors is deprecated" (warned).
    ("DestinationRule", "outlierDetection.consecutiveErrors"),
];

/// Identifiers (lower-cased, underscores dropped) used after a `.` or `::`, or before a `:`, in
/// every source file of `src/` outside the API types and the validation rules: a heuristic (a
/// common name is "read" wherever it appears), a guard against fields nothing mentions.
fn identifiers_read() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if rel.starts_with("config") || rel.starts_with("validation") {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if rel.ends_with(".rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let chars: Vec<char> = text.chars().collect();
                let mut i = 0;
                while i < chars.len() {
                    if chars[i].is_ascii_alphabetic() || chars[i] == '_' {
                        let start = i;
                        while i < chars.len()
                            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_')
                        {
                            i += 1;
                        }
                        // A field (`.name`), an enum variant (`Kind::Name`, a oneof's arm).
                        let after_dot = start > 0 && matches!(chars[start - 1], '.' | ':');
                        let rest: String = chars[i..].iter().take(3).collect();
                        let before_colon = rest.trim_start().starts_with(':')
                            && !rest.trim_start().starts_with("::");
                        if after_dot || before_colon {
                            let word: String = chars[start..i].iter().collect();
                            out.insert(normal(&word));
                        }
                    } else {
                        i += 1;
                    }
                }
            }
        }
    }
    out
}

fn normal(name: &str) -> String {
    name.trim_end_matches('_')
        .chars()
        .filter(|c| *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether `path` of `kind` is covered by an unhonoured entry (the whole kind, the path or a
/// parent of it; a DestinationRule's `trafficPolicy.` entries at every level).
fn warned(kind: &str, path: &str) -> bool {
    UNHONOURED
        .iter()
        .filter(|u| u.kind.name() == kind)
        .any(|u| {
            let p = u.path;
            let under = |base: &str, at: &str| {
                at == base
                    || at.starts_with(&format!("{base}."))
                    || at.starts_with(&format!("{base}["))
            };
            if p.is_empty() || under(p, path) {
                return true;
            }
            kind == "DestinationRule"
                && p.strip_prefix("trafficPolicy.").is_some_and(|tail| {
                    path.match_indices(tail).any(|(at, _)| {
                        (at == 0 || path[..at].ends_with('.')) && under(tail, &path[at..])
                    })
                })
        })
}

#[test]
fn every_istio_field_is_read_warned_or_judged() {
    let read = identifiers_read();
    let mut silent = BTreeSet::new();
    let mut checked = 0;
    for line in FIELDS.lines().filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (kind, path) = (cols[0], cols[2].replace("{}", ""));
        checked += 1;
        let leaf = path.replace("[]", "");
        let leaf = leaf.rsplit('.').next().unwrap_or_default();
        let judged = JUDGED_BY_VALIDATION
            .iter()
            .any(|(k, p)| *k == kind && (path == *p || path.ends_with(&format!(".{p}"))));
        if judged || warned(kind, &path) || read.contains(&normal(leaf)) {
            continue;
        }
        silent.insert(format!("{kind} {path}"));
    }
    assert!(checked > 1000, "only {checked} fields");
    assert!(
        silent.is_empty(),
        "fields neither read, nor listed as not honoured, nor judged by validation: {silent:#?}"
    );
}
